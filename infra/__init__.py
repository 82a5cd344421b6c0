"""The CDK app that deploys VDQ: one construct per concern, wired by stack.py."""
