# Models that call CPU DispatchStub kernels the paper's fixes changed (pr32541, pr32829): pip-
# installable, listed in runtime.requirements, named in train.model as
# "kernelmodels.models:MaxoutCNN" or "kernelmodels.models:SpatialTransformerCNN". Python 3.6+,
# torch 1.1+.
from setuptools import setup

setup(name="kernel-models", version="0.1.0", packages=["kernelmodels"])
