"""jetpy.store"""
