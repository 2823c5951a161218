"""jetpy.jetstream"""
