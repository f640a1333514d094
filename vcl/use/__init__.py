"""Using a finished run: ``train.py predict`` for new people's files, and the prediction service."""
