"""The local stack: the whole of VDQ on loopback, with moto as AWS and sandbox providers.

``vdq local`` runs it (``vdq.local.stack``). Nothing here is imported by a Lambda function.
"""
