"""console.domain.triage.triager"""
