"""What researchers and budget owners see: views of one instant of a cluster, real or simulated.

* :mod:`engine.views.state` - the serialisable view state (inputs of the last decision, ledger,
  runs, demand, history), built by :mod:`engine.views.simstate` (a simulation run) or
  :mod:`engine.views.live` (the reconciler's passes); :mod:`engine.views.codec` is its JSON;
* :mod:`engine.views.explain` (+ :mod:`engine.views.whatif`) - ``allot explain``;
  :mod:`engine.views.timeline` - ``allot explain --timeline``, the job at every pass of a
  simulated run;
* :mod:`engine.views.derived` and :mod:`engine.views.tables` - ``allot queue`` and the
  dashboard's rows;
* :mod:`engine.views.forecast` - ``allot eta`` (simulates forward with the simulator);
* :mod:`engine.views.series` and :mod:`engine.views.usage` - ``allot usage``;
* :mod:`engine.views.source` - where a command's state comes from (``--sim``/``--trace``/
  ``--report``/``--url``/``--state``; a report's run through :mod:`engine.commands.runrecord`),
  and :mod:`engine.views.statecache`, the simulated states kept on disk.
"""
