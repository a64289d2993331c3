"""netfl: a discrete-event network simulator for federated learning.

SimPy simulates devices, batteries, availability and links in simulated
seconds; those events trigger real PyTorch local training and server
aggregation. Start with ``netfl simulate topologies/quickstart.yaml``.
"""

__version__ = "0.1.0"
