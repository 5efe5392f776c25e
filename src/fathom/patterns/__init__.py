"""Multi-agent patterns: handoffs, router, workflow and dynamic orchestration."""
