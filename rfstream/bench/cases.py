"""What ``rfstream bench`` compares: the methods and the datasets of its end-to-end part."""

METHODS = ("rfstream", "sklearn-rbf", "sklearn-nystroem", "daskml-sgd")
#: the names --data takes -> their entries in rfstream.datasets.registry
REGISTRY_NAMES = {"kdd99": "kddcup99", "adult": "adult"}
DATASETS = tuple(REGISTRY_NAMES)
