"""bugimpact: does a fixed framework bug change the models trained with it?

This file must stay import-free: the training harness (``bugimpact.harness``) is imported inside old
framework runtimes (Python 3.6, PyTorch 1.1) where nothing host-side is installed.
"""
__version__ = "0.1.0"
