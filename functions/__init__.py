"""The Lambda handlers, one package per function.

Each handler imports boto3 itself, before anything from vdq. Under CPython 3.11 a hot loop
whose frames sit at a frame-stack chunk boundary maps and unmaps that chunk on every call, and
boto3's dependencies (urllib3's regex compiles) hit it when they are first imported nested deep
under vdq: about 10,000 mmap/munmap calls, ~60 ms, under vdq.dispatch.send. Imported at a
shallow depth, the same modules load without it (tests/unit/test_handlers_cold_start.py pins
the order).
"""
