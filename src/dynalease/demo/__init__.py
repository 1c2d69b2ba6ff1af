"""The demo behind ``dynalease demo``: see the locks work, and see them checked.

Needs the ``dev`` extra (moto for the embedded server, rich for the live view).
Nothing in the library imports this package, and it never goes in the Lambda
layer; it sits on the library faces (``client``, ``lock``, ``transaction``) and
never imports :mod:`dynalease.cli`.

- :mod:`.runner`: the supervisor (setup, processes, the crash, the verdict);
- :mod:`.plan`: the run's options and shape, and :class:`~.plan.DemoError`;
- :mod:`.processes`: one spawned process and its event stream;
- :mod:`.checks`: what the run's tables must show at the end;
- :mod:`.worker`, :mod:`.lambda_invocations`: the processes it spawns;
- :mod:`.state`, :mod:`.view`: what the supervisor has seen, and how it is shown;
- :mod:`.history`: the history tables and their checker (also used by the tests
  and the soak);
- :mod:`.local_server`: the local moto server (also used by the tests and the
  benchmarks).

This file imports nothing, so ``python -m dynalease.demo.worker`` and
``from dynalease.demo.local_server import LocalServer`` load only what they use.
"""
