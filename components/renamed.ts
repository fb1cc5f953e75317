import type * as pulumi from "@pulumi/pulumi";

/**
 * Options for a component whose type token changed: an alias to the old token, so stacks made
 * before the rename keep their resources (children inherit the alias) instead of replacing them.
 */
export function renamedFrom(oldType: string, opts: pulumi.ComponentResourceOptions | undefined): pulumi.ComponentResourceOptions {
  return { ...opts, aliases: [...(opts?.aliases ?? []), { type: oldType }] };
}
