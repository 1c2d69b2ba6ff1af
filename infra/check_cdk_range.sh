#!/usr/bin/env bash
# Runs the construct template tests against the lowest aws-cdk-lib the `cdk` extra allows
# (or the version given as $1), on top of the project's .venv. The lower bound is read from
# pyproject.toml; the latest is what .venv already has, so `make test` covers that end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
LOW=${1:-$($PY - <<'PY'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["cdk"]
spec = next(s for s in extra if s.startswith("aws-cdk-lib"))
print(re.search(r">=\s*([0-9.]+)", spec).group(1))
PY
)}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
echo "cdk-range: installing aws-cdk-lib==$LOW into $DIR (about 30 s)"
.venv/bin/pip install -q --no-deps --target "$DIR/lib" "aws-cdk-lib==$LOW"
# Older releases import this asset package from inside aws_cdk/; it is a separate wheel.
.venv/bin/pip install -q --no-deps --target "$DIR/kube" "aws-cdk.asset-kubectl-v20"
cp -r "$DIR/kube/aws_cdk/asset_kubectl_v20" "$DIR/lib/aws_cdk/"
# Node 20's banners would come out of jsii as bytes literals (see infra/app.py).
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
PYTHONPATH="$DIR/lib" $PY - <<PY
import importlib.metadata as m, aws_cdk
assert m.version("aws-cdk-lib") == "$LOW", m.version("aws-cdk-lib")
print("cdk-range: testing with aws-cdk-lib", m.version("aws-cdk-lib"), "from", aws_cdk.__file__)
PY
PYTHONPATH="$DIR/lib" .venv/bin/pytest -q -p no:cacheprovider \
  tests/infra/test_constructs_templates.py tests/infra/test_constructs_misuse.py
