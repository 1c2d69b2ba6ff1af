"""Runs one example handler the way Lambda would, inside ``python -I -S``.

Usage: ``python -I -S lambda_runner.py TASK_DIR LAYER_PYTHON_DIR RUNTIME_DIR DEV_DIR MODULE EVENT``.

``-I -S`` gives an interpreter with the standard library only: no site-packages,
no PYTHONPATH, not even this script's directory once it is removed below. The
path is then built like Lambda's: the function code, the layer's ``python/``,
and the packages the Lambda Python runtime ships; last, the repository's ``dev/``
(``DEV_DIR``) for the runner, ``dynalease_dev.invoke``, which is not in the layer. Prints one
JSON line.
"""

import importlib.util
import json
import sys
import traceback

task, layer, runtime, dev, module, event_path = sys.argv[1:]
del sys.path[0]  # this script's directory
sys.path[:0] = [task, layer, runtime, dev]

from dynalease_dev.invoke import invoke  # noqa: E402  (only importable once the path is set)

with open(event_path, encoding="utf-8") as handle:
    event = json.load(handle)

report = {}
try:
    report["result"] = invoke(f"{task}/{module}.py:handler", event, timeout=30.0)
except Exception as error:
    report["error"] = f"{type(error).__name__}: {error}"
    report["traceback"] = traceback.format_exc()
report["origins"] = {
    name: getattr(sys.modules.get(name), "__file__", None)
    for name in ("dynalease", "aws_lambda_powertools", "boto3", "botocore", "typing_extensions")
}
report["importable"] = {
    name: importlib.util.find_spec(name) is not None for name in ("aws_cdk", "moto", "pytest")
}
print(json.dumps(report, default=str))
