"""``python -m aidc_env.schema [case|instance|schedule]``: print the JSON Schema of a document (default: the
exchange format, ``instance``)."""

import sys

from aidc_env.io import dumps_json
from aidc_env.schema import json_schema

print(dumps_json(json_schema(sys.argv[1] if len(sys.argv) > 1 else "instance"), indent=1))
