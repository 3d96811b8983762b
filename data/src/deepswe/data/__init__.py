"""deepswe.data: the Task type, dataset loaders, decontamination and swe-mini synthesis."""
