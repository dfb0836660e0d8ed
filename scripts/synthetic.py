"""Synthetic but varied technical notes (fixed seed) for benchmarks."""

from __future__ import annotations

import random

TOPICS = [
    "deploy",
    "database migration",
    "auth token refresh",
    "rate limiter",
    "cache invalidation",
    "CI pipeline",
    "Kubernetes ingress",
    "feature flag",
    "logging format",
    "retry policy",
    "schema validation",
    "websocket reconnect",
    "S3 upload",
    "cron job",
    "memory leak",
    "flaky test",
    "dependency upgrade",
    "TLS certificate",
    "queue consumer",
    "search index",
]
VERBS = [
    "fails when",
    "must run before",
    "is configured by",
    "breaks if",
    "was fixed by",
    "depends on",
    "is slower than",
    "replaces",
    "is tested by",
    "should not touch",
]
THINGS = [
    "the staging cluster",
    "make release",
    "the nightly backup",
    "postgres 16",
    "redis sentinel",
    "the API gateway",
    "the billing worker",
    "pytest -x",
    "the onboarding flow",
    "terraform apply",
    "the Go client",
    "the React dashboard",
    "ERR_CONN_RESET",
    "OOMKilled pods",
    "the webhook handler",
    "HTTP 429 responses",
]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "config",
    "handler",
    "worker",
    "service",
    "request",
    "response",
    "timeout",
    "latency",
    "throughput",
    "replica",
    "shard",
    "partition",
    "commit",
    "branch",
    "merge",
    "rebase",
    "release",
    "rollback",
    "canary",
    "monitor",
    "alert",
    "metric",
    "trace",
    "span",
    "payload",
    "header",
    "cookie",
    "session",
]


def note(rng: random.Random, target_size: int) -> bytes:
    """A Markdown note of roughly ``target_size`` bytes."""
    topic = rng.choice(TOPICS)
    lines = [f"# {topic.title()} notes", ""]
    size = sum(len(x) + 1 for x in lines)
    while size < target_size:
        if rng.random() < 0.15:
            line = f"## {rng.choice(TOPICS).capitalize()}"
        else:
            extra = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            line = (
                f"- The {rng.choice(TOPICS)} {rng.choice(VERBS)} {rng.choice(THINGS)}; "
                f"{extra} (ticket {rng.randint(100, 9999)})."
            )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines).encode()[:target_size]


def notes(count: int, min_size: int, max_size: int, seed: int = 42):
    rng = random.Random(seed)
    for i in range(count):
        yield (
            f"notes/{rng.choice(TOPICS).replace(' ', '-')}/{i:06d}.md",
            note(rng, rng.randint(min_size, max_size)),
        )
