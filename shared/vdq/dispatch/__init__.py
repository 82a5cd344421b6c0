"""Dispatch: one send message in, one provider call out, its outcome recorded.

``send`` claims an item and hands it to SES or Twilio; ``sendbatch`` takes an SQS batch in the
order ``batchplan`` gives it and overlaps the provider calls; ``pacing`` holds every send to the
provider's rate; ``giveback`` returns a claimed item that may not go out yet; ``outbound``
builds what goes out (the email's MIME from ``mime``) and makes the call. Imports: core, store,
providers, the workflow, the runtime, and results (the suppression list, the tracking tags and
the update a provider's answer makes).
"""

__all__ = ["send", "sendbatch"]  # the modules other parts may import
