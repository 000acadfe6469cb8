"""Answers: chat, checklists, conversations and the tool decision (the tools themselves:
``ragline.services.tools``)."""
