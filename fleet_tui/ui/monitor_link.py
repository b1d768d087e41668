"""Placeholder."""
class MonitorLink:
    def __init__(self, app, source, interval_s):
        pass
    def start(self): pass
    async def stop(self): pass
    def toggle_pause(self): pass
