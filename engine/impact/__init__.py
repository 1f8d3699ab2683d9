"""The GitOps dry-run: what a change to budgets/ or policies/ would do, before it is merged.

- :mod:`engine.impact.diff`: the structural diff of two validated configurations (nodes added,
  removed, moved; shares of parent and effective shares before/after, in GPUs per cluster;
  owners, principals; policy knobs).
- :mod:`engine.impact.replay`: the same trace replayed under both revisions through the
  simulator, compared per team (delivered and entitled GPU-hours, waits, preemptions) and
  cluster-wide; :mod:`engine.impact.window` picks the trace's days and their compression,
  :mod:`engine.impact.runs` runs the two replays.
- :mod:`engine.impact.report`: the Markdown pull-request comment and its JSON twin, its
  values and tables written by :mod:`engine.impact.cells`; :mod:`engine.impact.chart`: the PNG
  of the per-team change.

The command is ``allot impact`` (:mod:`engine.commands.impact`); ``ci/`` holds the GitHub
Actions workflow and the script that posts the report as one sticky pull-request comment.
"""
