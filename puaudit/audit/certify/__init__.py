"""Certified trust or escalate (docs/method.md, "Certified trust or escalate" and "A cascade of
judges"): the fixed-sequence test (:mod:`~puaudit.audit.certify.sequence`), one judge's
certification (:mod:`~puaudit.audit.certify.judge`), the cascade and its union
(:mod:`~puaudit.audit.certify.cascade`) and the rows escalated to the next judge
(:mod:`~puaudit.audit.certify.escalation`)."""
