"""Hybrid test-time scaling end to end (`deepswe-reproduce tts`, `make eval-tts`).

config.py    the profile's `tts:` section, validated at load
mixture.py   the task subsets, scripted wrong fixes, one merged pool per split
pipeline.py  the stages: candidates, judge, ef, eb, report (resumable)
auc.py       the judge's AUC with Hanley-McNeil and task-bootstrap uncertainty
report.py    the TTS report on top of deepswe.verify.report
cli.py       the `tts` verb
"""
