#!/usr/bin/env python3
"""Summarise a cargo-mutants run (mutants.out/outcomes.json) as Markdown.

Usage: scripts/mutants/report.py [mutants.out] [--missed]

Prints one table row per source file (mutants caught, missed, timed out, unviable) and the
totals, with the run's start and end time; --missed adds the names of the mutants that survived.
"""
import collections
import json
import pathlib
import sys

KINDS = {
    "CaughtMutant": "caught",
    "MissedMutant": "missed",
    "Timeout": "timeout",
    "Unviable": "unviable",
}


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    out = pathlib.Path(args[0] if args else "mutants.out")
    data = json.loads((out / "outcomes.json").read_text())
    per_file = collections.defaultdict(collections.Counter)
    missed = []
    for o in data["outcomes"]:
        mutant = o["scenario"].get("Mutant") if isinstance(o["scenario"], dict) else None
        if mutant is None:
            continue  # the baseline build and test
        kind = KINDS.get(o["summary"], o["summary"])
        per_file[mutant["file"]][kind] += 1
        if kind == "missed":
            missed.append(mutant["name"])
    cols = ["caught", "missed", "timeout", "unviable"]
    print(f"Run: {data.get('start_time')} to {data.get('end_time')}, "
          f"cargo-mutants {data.get('cargo_mutants_version')}\n")
    print("| file | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    total = collections.Counter()
    for f in sorted(per_file):
        total.update(per_file[f])
        print(f"| `{f}` | " + " | ".join(str(per_file[f][c]) for c in cols) + " |")
    print("| **all** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    judged = total["caught"] + total["missed"] + total["timeout"]
    if judged:
        score = 100.0 * (total["caught"] + total["timeout"]) / judged
        print(f"\nCaught {score:.1f}% of the {judged} viable mutants.")
    if "--missed" in argv and missed:
        print("\nMissed:\n")
        for m in missed:
            print(f"- `{m}`")


if __name__ == "__main__":
    main(sys.argv[1:])
