"""Schedules: what runs on a timer or on the table's stream rather than on a request.

``sweeps`` runs the checks EventBridge names (the re-publish and stray sweeps, email timeouts,
the release of scheduled sends, the purge of idle files), with ``sms`` (SMS polling and
timeouts), ``leases`` (sends whose lease ran out) and ``dead_letters``, over ``timers`` (the
timers index's reads) and ``report`` (what a run did); ``archive`` writes what
DynamoDB's TTL deleted to S3; ``postings`` writes, once per stream window, what the searches by
time, sender and provider ID read and the counts of what happened per hour; ``stream`` does all
a batch of the table's stream asks, and ``repair`` does it again for the batches its mapping
skipped (``vdq repair-stream``). Imports: core, store, providers, the workflow, the runtime,
intake's scheduling and results (a polled SMS status is a provider update); never dispatch or
operations.
"""

# The modules other parts may import.
__all__ = ["archive", "postings", "repair", "stream", "sweeps"]
