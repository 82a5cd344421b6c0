"""The core: what every other part of VDQ uses and which uses nothing of VDQ.

Settings (``settings``, read once into one frozen object; their parsers ``setting_values``),
domain errors (``errors``, each mapped to one HTTP status at the REST edge), identifiers
(``ids``), time (``clock``), logging, metrics and tracing (``observability``), and the shape of
the AWS resources as plain data (``resources``: the CDK app and the local stack both build from
it), and the table's stream records as its mapping hands them on (``streams``). Imports: the
standard library and third-party packages only, never another part of vdq.
"""
