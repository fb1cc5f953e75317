import { describe, expect, it } from "vitest";
import { startSshd } from "../helpers/sshd";

// Why a copy grant holds addresses only (crossFieldChecks.ts, grantsNeedAddresses): a stock
// sshd (no UseDNS in its config, so its default `no`) matches `from=` against the address the
// client connects from, and a host name there never matches, even one that resolves to it.
describe("from= in authorized_keys, against a stock sshd", () => {
  const login = async (keyOptions: string) => {
    const server = await startSshd(keyOptions);
    try {
      return await server.run("echo in");
    } finally {
      server.stop();
    }
  };

  it("admits the address the client connects from", async () => {
    expect((await login('from="127.0.0.1",restrict')).stdout).toBe("in\n");
  });

  it("refuses a host name, even localhost, which resolves to that address", async () => {
    const refused = await login('from="localhost",restrict');
    expect(refused.status).not.toBe(0);
    expect(refused.stdout).toBe("");
  });
});
