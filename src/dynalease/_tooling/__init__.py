"""What the user commands run on a developer's machine: console tables, the table
diagnosis and its timings (``doctor``, ``inspect``), and the local moto server
(``dynalease local``).

It sits below both :mod:`dynalease.cli` and the demo (:mod:`dynalease_dev.demo`),
so neither has to import the other for them; it imports only the library faces and
``testing``'s moto backend. The tests and the benchmarks use it too; the library
itself never imports it. Like the command it never goes in the Lambda layer.
"""
