// The component provider: Pulumi runs the package's `main` (this file, built) as the plugin of
// PulumiPlugin.yaml, and `pulumi package add` gives every Pulumi language ModelServing. The schema is
// inferred from the TypeScript source under provider/ (its package.json and tsconfig.json).
import * as fs from "node:fs";
import * as path from "node:path";
import { componentProviderHost } from "@pulumi/pulumi/provider/experimental";
import { packageRoot } from "../core/packageRoot";
import { ModelServing } from "./modelServing";

export { ModelServing };

const root = packageRoot();
const { version } = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string };
// The host passes `version` on to the provider (its typings omit it); without it the schema says 0.0.0.
const options: Parameters<typeof componentProviderHost>[0] & { version: string } = {
  name: "rbln-serving",
  components: [ModelServing],
  dirname: path.join(root, "provider"),
  version,
};
void componentProviderHost(options);
