"""Schedules: what runs on a timer or on the table's stream rather than on a request.

``sweeps`` holds the checks EventBridge runs (SMS polling and timeouts, the lease and re-publish
sweeps, the release of scheduled sends, the purge of idle files); ``archive`` writes what
DynamoDB's TTL deleted to S3; ``postings`` writes, once per stream window, what the searches by
time, sender and provider ID read and the counts of what happened per hour. Imports: core,
store, providers, the workflow, the runtime, intake's scheduling and results (a polled SMS
status is a provider update); never dispatch or operations.
"""

__all__ = ["archive", "postings", "sweeps"]  # the modules other parts may import
