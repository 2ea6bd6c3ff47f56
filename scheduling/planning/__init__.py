"""Capacity planning: the what-if replay (``whatif``, pure), the public trace reader (``trace``) and the
portal's own request history in the replay's terms (``history``)."""
