# An example of your own model for a study: pip-installable, listed in runtime.requirements, named
# in train.model as "periodic.models:PeriodicCNN". Python 3.6+, torch 1.1+.
from setuptools import setup

setup(name="periodic-model", version="0.1.0", packages=["periodic"])
