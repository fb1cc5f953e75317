/**
 * What the plan tells people, by what they must do about it: a `warning` asks for an action (a
 * risk to remove, a setting that does nothing, a step that will be refused); a `note` states a
 * fact (what the recipe or the platform does, a choice the stack made). `plan` prints them apart,
 * and the program exports them as `warnings` and `notes`.
 */
export interface PlanMessage {
  level: "warning" | "note";
  text: string;
}

export const warning = (text: string): PlanMessage => ({ level: "warning", text });
export const note = (text: string): PlanMessage => ({ level: "note", text });

/** The texts of one level, in the plan's order. */
export function messagesAt(messages: readonly PlanMessage[], level: PlanMessage["level"]): string[] {
  return messages.filter((m) => m.level === level).map((m) => m.text);
}
