"""exec"""
