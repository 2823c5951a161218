"""jetpy.bench"""
