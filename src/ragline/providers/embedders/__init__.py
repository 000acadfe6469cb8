"""Embedding providers.

Hugging Face libraries are kept offline by ``Settings.apply_process_environment``
(called by ``Ragline.start``): ragline never downloads models at run time.
"""
