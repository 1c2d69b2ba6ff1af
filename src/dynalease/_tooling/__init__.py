"""What the user commands run on a developer's machine: console tables, the table diagnosis
and its timings, and the local moto server. Below both :mod:`dynalease.cli` and the demo;
the library never imports it, and it never goes in the Lambda layer.
"""

#: What the local server accepts and what ``dynalease local`` tells a shell to use: dummy
#: credentials and a Region (here, not in ``local_server``, which loads ``http.server``).
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
LOCAL_REGION = "us-east-1"
