"""The demo behind ``dynalease-dev demo``: see the locks work, and see them checked.

Part of the development tools (``pip install -e ./dev``, which ``make demo`` does),
with the ``dev`` extra's moto for the embedded server and rich for the live view.
Nothing in the library imports this package, and it never goes in the dynalease
wheel or the Lambda layer; it sits on the library faces (``client``, ``lock``,
``transaction``) and the command's console, table diagnosis and local server
(``dynalease._tooling``), and never imports :mod:`dynalease.cli`.

- :mod:`.runner`: the supervisor (setup, processes, the crash, the verdict);
- :mod:`.plan`: the run's options and shape, and :class:`~.plan.DemoError`;
- :mod:`.processes`: one spawned process and its event stream;
- :mod:`.checks`: what the run's tables must show at the end;
- :mod:`.worker`, :mod:`.lambda_invocations`: the processes it spawns;
- :mod:`.state`, :mod:`.view`: what the supervisor has seen, and how it is shown;
- :mod:`.history`: the history tables and their checker (also used by the tests
  and the soak);
- the local moto server is :mod:`dynalease._tooling.local_server`: ``dynalease
  local`` serves it to users, so it ships with the command.

This file imports nothing, so ``python -m dynalease_dev.demo.worker`` and
``from dynalease._tooling.local_server import LocalServer`` load only what they use.
"""
