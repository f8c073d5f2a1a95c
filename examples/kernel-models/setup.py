# Models that call CPU kernels fixes changed (pr32541, pr32829, pr38262): pip-installable, listed
# in runtime.requirements, named in train.model as "kernelmodels.models:MaxoutCNN",
# "kernelmodels.models:SpatialTransformerCNN" or "kernelmodels.models:SegmentPoolCNN". Python
# 3.6+, torch 1.1+.
from setuptools import setup

setup(name="kernel-models", version="0.1.0", packages=["kernelmodels"])
