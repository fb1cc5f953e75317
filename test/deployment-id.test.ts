import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_INSTANCE, checkInstanceName, deploymentId, envPath, legacyEnvPath, legacyUnitName, unitName } from "../core/render/hosts/names";
import { hostileString } from "./helpers/arbitraries";

/** Small alphabets, so that pairs which a naive join would merge come up often. */
const stackName = fc.string({ unit: fc.constantFrom("a", "b", "-", "_", ".", "0"), maxLength: 6 });
const instanceName = fc.oneof(
  fc.constant(DEFAULT_INSTANCE),
  fc.string({ unit: fc.constantFrom("a", "b", "-", ".", "_", "/", "é", " ", DEFAULT_INSTANCE), maxLength: 5 }),
);
const roleName = fc.string({ unit: fc.constantFrom("a", "-"), maxLength: 3 }).map((tail) => `a${tail}`);
/** What systemd accepts as a unit name without escapes (unit_name_is_valid), UNIT_NAME_MAX 255. */
const SYSTEMD_UNIT_NAME = /^[A-Za-z0-9:_.\\@-]{1,255}$/;

describe("the deployment id on a host", () => {
  it("is the stack for the program's own instance and <stack>.<instance> for another, as written", () => {
    expect(deploymentId("dev", DEFAULT_INSTANCE)).toBe("dev");
    expect(deploymentId("prod-eu", "team-a")).toBe("prod-eu.team-a");
    expect(deploymentId("staging_2", "Team_B")).toBe("staging_2.Team_B");
    expect(unitName(deploymentId("dev", DEFAULT_INSTANCE), "main", 0)).toBe("rbln-serving-dev.main-0.service");
    // Readable up to 64 characters, hashed beyond.
    expect(deploymentId("s".repeat(64), DEFAULT_INSTANCE)).toBe("s".repeat(64));
    expect(deploymentId("s".repeat(65), DEFAULT_INSTANCE)).toMatch(/^s{24}\.rbln-serving\.[0-9a-f]{12}$/);
  });

  it("knows the names earlier versions gave, exactly, so a unit step can take them over", () => {
    expect(legacyUnitName("decode", 3)).toBe("rbln-serving-decode-3.service");
    expect(legacyEnvPath("/opt/rbln-serving", "main", 0)).toBe("/opt/rbln-serving/env/main-0.env");
  });

  it("never gives two different (stack, instance) pairs the same id", () => {
    const pairs: [string, string, string, string][] = [
      ["a-b", "c", "a", "b-c"],
      ["a.b", DEFAULT_INSTANCE, "a", "b"],
      ["dev", "x.y", "dev.x", "y"],
      ["dev!", DEFAULT_INSTANCE, "dev?", DEFAULT_INSTANCE],
      ["dev", `${DEFAULT_INSTANCE}!`, "dev", `${DEFAULT_INSTANCE}?`],
    ];
    for (const [stackA, instanceA, stackB, instanceB] of pairs) expect(deploymentId(stackA, instanceA)).not.toBe(deploymentId(stackB, instanceB));
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(stackName, instanceName), { minLength: 2, maxLength: 60, selector: (p) => JSON.stringify(p) }), (pairs) => {
        const ids = pairs.map(([stack, instance]) => deploymentId(stack, instance));
        expect(new Set(ids).size).toBe(ids.length);
      }),
      { numRuns: 400, seed: 13 },
    );
  });

  it("gives units of different deployments, roles or ranks different names, and never a name of the versions before ids", () => {
    // Role names may have '-' too (the recipe schema): "a-b" with role "c" against "a" with role "b-c".
    const unit = fc.tuple(fc.string({ unit: fc.constantFrom("a", "-"), maxLength: 4 }), fc.constantFrom(DEFAULT_INSTANCE, "a", "a-a"), roleName, fc.nat(1));
    fc.assert(
      fc.property(fc.uniqueArray(unit, { minLength: 2, maxLength: 60, selector: (u) => JSON.stringify(u) }), (units) => {
        const names = units.map(([stack, instance, role, rank]) => unitName(deploymentId(stack, instance), role, rank));
        expect(new Set(names).size).toBe(names.length);
        for (const [, , role, rank] of units) expect(names).not.toContain(legacyUnitName(role, rank));
      }),
      { numRuns: 300, seed: 14 },
    );
  });

  it("is a valid unit and file name, 64 characters at most, whatever the names; what was replaced or cut is hashed", () => {
    fc.assert(
      fc.property(
        fc.oneof(hostileString, fc.string({ minLength: 60, maxLength: 300 })),
        fc.oneof(fc.constant(DEFAULT_INSTANCE), hostileString, fc.string({ minLength: 60, maxLength: 300 })),
        (stack, instance) => {
          const id = deploymentId(stack, instance);
          expect(id).toMatch(/^[A-Za-z0-9_.-]{1,64}$/);
          expect(unitName(id, "main", 0)).toMatch(SYSTEMD_UNIT_NAME);
          expect(envPath("/opt/rbln-serving", id, "main", 0).split("/").pop()!.length).toBeLessThanOrEqual(255);
          const readable = instance === DEFAULT_INSTANCE ? stack : `${stack}.${instance}`;
          if (id !== readable) expect(id).toMatch(/\.[0-9a-f]{12}$/);
        },
      ),
      { numRuns: 500, seed: 15 },
    );
    expect(deploymentId("s".repeat(40), "i".repeat(40))).toMatch(/^s{24}\.i{24}\.[0-9a-f]{12}$/);
    expect(deploymentId("dev", "team a/b")).toMatch(/^dev\.team-a-b\.[0-9a-f]{12}$/);
    // docs/hosts.md's example.
    expect(deploymentId("my.stack", "team a")).toBe("my-stack.team-a.9b7724305540");
  });

  it("comes from an instance name of printable text; a control character is refused with one line", () => {
    for (const name of ["team a/b", `quo"te's \\ back\\n`, "é ü 日本", "x".repeat(300)]) expect(() => checkInstanceName(name)).not.toThrow();
    const refusal = (name: string) => `name: ${name} holds a control character; an instance name may hold printable characters only`;
    expect(() => checkInstanceName("team\nssh-ed25519 AAAA x")).toThrow(refusal('"team\\nssh-ed25519 AAAA x"'));
    expect(() => checkInstanceName("\u0000")).toThrow(refusal('"\\u0000"'));
    expect(() => checkInstanceName("tab\there")).toThrow(refusal('"tab\\there"'));
    // DEL and C1, which JSON leaves raw, come out escaped too.
    expect(() => checkInstanceName("a\u007f\u0080\u009fb")).toThrow(refusal('"a\\u007f\\u0080\\u009fb"'));
    expect(() => checkInstanceName("\u00a0nbsp")).not.toThrow();
  });
});
