import fc from "fast-check";

/** Strings with the characters that break naive quoting: quotes, $, backticks, %, newlines, JSON. */
export const hostileString = fc.oneof(
  fc.string({ unit: fc.constantFrom(..."'\"$`\\%!*?[]{}()<>|&;#~= \t\nabcXYZ019-_./:@"), maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.json(),
);
