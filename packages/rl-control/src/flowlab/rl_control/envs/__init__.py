"""Environments and their offline data: single-agent gymnasium control (`control`)."""
