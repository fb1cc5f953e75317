import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { readStackFile } from "../core/config/stackFile";
import { runProgram } from "../program";
import { ModelServing as ProviderModelServing } from "../provider/modelServing";
import { runUnderMocks, type Registration } from "./helpers/pulumiHarness";

// The type tokens before the component package moved them into the `index` module.
const RENAMED: Record<string, string> = {
  "rbln-serving:index:NpuHost": "rbln-serving:hosts:NpuHost",
  "rbln-serving:index:NpuWorkloads": "rbln-serving:kubernetes:NpuWorkloads",
  "rbln-serving:index:LlmdRouter": "rbln-serving:router:LlmdRouter",
};

const SECRETS = { sshPrivateKey: "key", pipPassword: "pw", hfToken: "hf", apiKey: "api" };

/** A resource's URN as the old tokens made it. */
function oldUrn(urn: string): string {
  return Object.entries(RENAMED).reduce((acc, [now, before]) => acc.split(now).join(before), urn);
}

/** urn:pulumi:<stack>::<project>::<parent type>$<type>::<name>, as the mock monitor forms URNs (the engine keeps the whole chain; a token changes both alike). */
function childUrn(parentUrn: string, type: string, name: string): string {
  const [head, project, chain] = parentUrn.split("::") as [string, string, string];
  return `${head}::${project}::${chain.split("$").pop()}$${type}::${name}`;
}

/** Every URN the engine matches a registration against: its own, its aliases', and those its parents' aliases give it. */
function matchedUrns(registration: Registration, byUrn: Map<string, Registration>): Set<string> {
  const parent = byUrn.get(registration.parent);
  const types = [registration.type, ...registration.aliasTypes];
  if (!parent) return new Set(types.map((type) => registration.urn.replace(`::${registration.type}::`, `::${type}::`)));
  const urns = new Set<string>();
  for (const parentUrn of matchedUrns(parent, byUrn)) for (const type of types) urns.add(childUrn(parentUrn, type, registration.name));
  return urns;
}

async function registrationsOf(program: () => unknown, config: Record<string, unknown>) {
  const { registrations, error } = await runUnderMocks(program, config, SECRETS);
  expect(error).toBeUndefined();
  return registrations;
}

describe("renamed type tokens keep existing stacks", () => {
  it.each(["dev", "prod"])("every resource of stack %s keeps its URN or has an alias to the old one", async (stack) => {
    const registrations = await registrationsOf(runProgram, readStackFile(stack).raw);
    const byUrn = new Map(registrations.map((r) => [r.urn, r]));
    const renamed = registrations.filter((r) => r.urn !== oldUrn(r.urn));
    expect(renamed.length).toBeGreaterThan(0);
    for (const registration of registrations) {
      expect(matchedUrns(registration, byUrn), registration.urn).toContain(oldUrn(registration.urn));
    }
  });

  it("the provider's ModelServing registers the same resources as the component", async () => {
    const raw = readStackFile("dev").raw as Record<string, any>;
    const direct = await registrationsOf(runProgram, raw);
    const viaProvider = await registrationsOf(
      () =>
        new ProviderModelServing("rbln-serving", {
          ...raw,
          strategy: raw.strategy,
          target: raw.target,
          sshPrivateKey: pulumi.secret(SECRETS.sshPrivateKey),
          pipPassword: SECRETS.pipPassword,
          hfToken: SECRETS.hfToken,
          apiKey: SECRETS.apiKey,
        }),
      {},
    );
    expect(viaProvider.map((r) => r.urn).sort()).toEqual(direct.map((r) => r.urn).sort());
  });
});
