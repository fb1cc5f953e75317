#!/usr/bin/env bash
# Every commit after a base has a subject (its first line, as `git log` shows it) of at most 72
# characters: the story goes in the body (CONTRIBUTING.md, "Commits").
#
#   scripts/check-commit-subjects.sh [BASE]
#
# Checks the repository of the current directory, BASE..HEAD. BASE defaults to the commit the rule
# took effect at; older subjects are left as they are. Merge commits are not checked: their subject
# says what was merged (git's default "Merge branch 'x' into y" grows with the branch names), and
# the commits merged are checked themselves. In a shallow clone the script says so and checks the
# commits it has. Exit 0 when all fit, 1 naming each one that does not, 2 when BASE is no commit.
set -euo pipefail

readonly MAX_SUBJECT=72
# main when the rule came in (issue 27, house rules).
readonly RULE_BASE=aa70d50c8a9fa6fe634a15521df0b6d2b8e98dd5
base=${1:-$RULE_BASE}

# Lengths in characters, not bytes: a subject may say "→".
export LC_ALL=C.UTF-8

range="$base..HEAD"
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  if git cat-file -e "$base^{commit}" 2>/dev/null; then
    echo "check-commit-subjects: shallow history; checking $range as far as it goes" >&2
  else
    echo "check-commit-subjects: shallow history without $base; checking every commit it has" >&2
    range=HEAD
  fi
elif ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "check-commit-subjects: base $base is not a commit of this repository" >&2
  exit 2
fi

checked=0
long=0
while IFS=$'\t' read -r sha subject; do
  checked=$((checked + 1))
  if [ "${#subject}" -gt "$MAX_SUBJECT" ]; then
    long=$((long + 1))
    echo "${sha:0:12} ${#subject} characters: $subject"
  fi
done < <(git log --no-merges --format='%H%x09%s' "$range")

if [ "$long" -gt 0 ]; then
  echo "check-commit-subjects: $long of $checked commit subjects after ${base:0:12} are over $MAX_SUBJECT characters; reword them (git rebase -i, reword) and put the detail in the body" >&2
  exit 1
fi
echo "check-commit-subjects: $checked commit subjects after ${base:0:12}, all within $MAX_SUBJECT characters"
