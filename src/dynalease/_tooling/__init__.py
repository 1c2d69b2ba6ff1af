"""What the user commands run on a developer's machine: console tables, the table diagnosis
and its timings, and the local moto server. Below both :mod:`dynalease.cli` and the demo;
the library never imports it, and it never goes in the Lambda layer.
"""
