"""Prints a job's events.jsonl as a short table (scripts/quickstart): time, allocation, event and
the details that tell the story (step, source, job, ranks)."""

import json
import sys

SHOWN = ("step", "source", "job", "ranks", "reason")

for line in open(sys.argv[1]):
    event = json.loads(line)
    details = event.get("details", {})
    extra = " ".join(f"{key}={details[key]}" for key in SHOWN if key in details)
    print(f"    {event['time']}  allocation {event['allocation']}  {event['event']:<22} {extra}")
