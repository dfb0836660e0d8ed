"""memvault: an encrypted, offline memory vault for AI agents."""

import os as _os

# Nothing leaves the machine: onnxruntime creates a device id and queues usage
# events under ~/.cache/Microsoft as soon as it is imported, unless this is
# set first. Every entry point imports this package before onnxruntime, and
# the value is forced: an inherited "0" must not turn it back on.
_os.environ["ORT_DISABLE_TELEMETRY"] = "1"

__version__ = "0.1.0"
