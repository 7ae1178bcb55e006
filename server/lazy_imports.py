"""Start-up: import the wire codecs the server uses, not the clients their packages bring.

`kafka/__init__.py` (kafka-python) imports its whole client (admin, consumer, producer,
metrics, the network layer), `aiokafka/__init__.py` and `aiokafka/record/__init__.py` theirs,
and `kafka/protocol/{admin,consumer,metadata,producer}/__init__.py` every schema of their
submodules (building a message class from its JSON schema costs about a millisecond); the
server needs only kafka.protocol's message classes, each API's at its first request
(protocol/api.py), and aiokafka's record batches. Those package inits were about half of
`kcoord serve`'s start-up.

defer_package_inits() registers such a package without running its __init__, so that its
submodules import alone. The first attribute asked of the package module itself (say
`from kafka import KafkaConsumer`) runs the real __init__ then: nothing breaks, it only costs
its time when, and if, someone needs it. Called by `kcoord serve` before anything imports
those packages; other processes (tests, tools) import them as usual.
"""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

# parents first: a subpackage's spec is found through its parent's __path__
DEFERRED = ("kafka", "kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata",
            "kafka.protocol.producer", "aiokafka", "aiokafka.record")


def defer_package_inits(names: tuple[str, ...] = DEFERRED) -> None:
    for name in names:
        if name in sys.modules:
            continue  # already imported for real: nothing to save
        parent, _, child = name.rpartition(".")
        if parent and parent not in sys.modules:
            importlib.import_module(parent)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            continue
        module = importlib.util.module_from_spec(spec)
        module.__getattr__ = _run_init_on_demand(module, spec)  # type: ignore[method-assign]
        sys.modules[name] = module
        if parent:
            setattr(sys.modules[parent], child, module)


def _run_init_on_demand(module: ModuleType, spec) -> object:  # noqa: ANN001
    def __getattr__(attr: str) -> object:
        if attr.startswith("__"):  # import machinery probing (__path__ is set, others absent)
            raise AttributeError(attr)
        del module.__getattr__
        spec.loader.exec_module(module)
        return getattr(module, attr)

    return __getattr__
