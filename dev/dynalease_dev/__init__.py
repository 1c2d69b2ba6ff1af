"""dynalease's development tools: never in the dynalease wheel or the Lambda layer.

- :mod:`.demo`: ``dynalease-dev demo`` (workers, Lambda handlers and a crash on a local
  server, then the history checked);
- :mod:`.invoke`: ``dynalease-dev invoke``'s runner, a handler called with a context
  whose time really counts down (``CountdownContext``), for the demo and the tests;
- :mod:`.lambda_plane`, :mod:`.lambda_api`, :mod:`.lambda_workers`: a local Lambda
  control plane (Runtime and Extensions APIs) for ``dynalease-dev invoke --lifecycle``
  (:mod:`.lifecycle`), the demo, the recovery tests and benchmarks.

They sit on dynalease's faces (and its command's console and local server); the
library never imports them. Installed by ``make`` (``pip install -e ./dev``).
"""
